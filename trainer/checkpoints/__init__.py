"""Training checkpoints: the crash-safe format, saving, resume selection, validation and the toolkit.

CLI: ``python -m trainer.checkpoints verify|inspect|list|repair|export`` (see ``__main__``).
"""

from trainer.checkpoints.digest import (
    DigestCheck,
    check_file_digest,
    check_file_digest_cached,
)
from trainer.checkpoints.export import ExportReport, export_checkpoint
from trainer.checkpoints.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    REQUIRED_KEYS,
    CheckpointError,
    UnsafeValueError,
    bare_model_message,
    build_checkpoint,
    checkpoint_kind,
    manifest_record,
    manifests_record,
    model_state_of,
    optimizer_param_names,
    to_plain,
    tokenizer_record,
    versions_record,
)
from trainer.checkpoints.inspect import inspect_checkpoint
from trainer.checkpoints.listing import CheckpointSummary, list_checkpoints
from trainer.checkpoints.loading import load_checkpoint
from trainer.checkpoints.lock import LockHeld, OutputDirLock, lock_holder
from trainer.checkpoints.metadata import CheckpointMetadata, read_metadata
from trainer.checkpoints.nonfinite import nonfinite_tensors
from trainer.checkpoints.repair import RepairReport, repair_checkpoint
from trainer.checkpoints.resume import ResumeChoice, checkpoint_files_exist, select_resume
from trainer.checkpoints.rng import RngStateError, capture_rng_state, check_rng_state, restore_rng_state
from trainer.checkpoints.store import (
    BEST,
    LATEST,
    CheckpointManager,
    CheckpointSaveError,
    clean_stale_temp_files,
    step_checkpoints,
    step_file_name,
    write_checkpoint_file,
)
from trainer.checkpoints.validate import (
    Expectation,
    ValidationReport,
    expected_state_shapes,
    validate_checkpoint,
)
from trainer.checkpoints.verify import verify_checkpoint
from trainer.checkpoints.verify_report import COMPLETE, INVALID, PARTIAL, Component, VerifyReport

__all__ = [
    "BEST",
    "COMPLETE",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "INVALID",
    "LATEST",
    "PARTIAL",
    "REQUIRED_KEYS",
    "CheckpointError",
    "CheckpointManager",
    "CheckpointMetadata",
    "CheckpointSaveError",
    "CheckpointSummary",
    "Component",
    "DigestCheck",
    "Expectation",
    "ExportReport",
    "LockHeld",
    "OutputDirLock",
    "RepairReport",
    "ResumeChoice",
    "RngStateError",
    "UnsafeValueError",
    "ValidationReport",
    "VerifyReport",
    "bare_model_message",
    "build_checkpoint",
    "capture_rng_state",
    "check_file_digest",
    "check_file_digest_cached",
    "check_rng_state",
    "checkpoint_files_exist",
    "checkpoint_kind",
    "clean_stale_temp_files",
    "expected_state_shapes",
    "export_checkpoint",
    "inspect_checkpoint",
    "list_checkpoints",
    "load_checkpoint",
    "lock_holder",
    "manifest_record",
    "manifests_record",
    "model_state_of",
    "nonfinite_tensors",
    "optimizer_param_names",
    "read_metadata",
    "repair_checkpoint",
    "restore_rng_state",
    "select_resume",
    "step_checkpoints",
    "step_file_name",
    "to_plain",
    "tokenizer_record",
    "validate_checkpoint",
    "verify_checkpoint",
    "versions_record",
    "write_checkpoint_file",
]
