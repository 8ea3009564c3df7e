"""SentencePiece ModelProto helpers: load, save, inspect and re-encode models as protobuf.

Everything that edits a tokenizer goes through the ModelProto (``sentencepiece_model_pb2``): pieces keep
their exact strings, scores and types, and the normaliser / trainer settings are copied byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as model_pb2

from data_tools.fileio import atomic_write_bytes

ModelProto = model_pb2.ModelProto
Piece = model_pb2.ModelProto.SentencePiece

NORMAL = Piece.NORMAL
UNKNOWN = Piece.UNKNOWN
CONTROL = Piece.CONTROL
USER_DEFINED = Piece.USER_DEFINED
UNUSED = Piece.UNUSED
BYTE = Piece.BYTE

# Pieces that the encoder can match in text (the others are ids with reserved meanings).
TEXT_PIECE_TYPES = frozenset({NORMAL, USER_DEFINED, UNUSED})

_MODEL_TYPES = {
    model_pb2.TrainerSpec.UNIGRAM: "unigram",
    model_pb2.TrainerSpec.BPE: "bpe",
    model_pb2.TrainerSpec.WORD: "word",
    model_pb2.TrainerSpec.CHAR: "char",
}
_TYPE_NAMES = {NORMAL: "normal", UNKNOWN: "unknown", CONTROL: "control", USER_DEFINED: "user_defined",
               UNUSED: "unused", BYTE: "byte"}

WHITESPACE = "\u2581"  # "▁", SentencePiece's visible space


class TokenizerToolError(ValueError):
    """A tokenizer file or request that cannot be used; the message is one line saying what and where."""


def load_model_proto(path: str | Path) -> ModelProto:
    """Parse a ``.model`` file (raises TokenizerToolError naming the file when it is not one)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TokenizerToolError(f"tokenizer model not found: {path}") from None
    except OSError as exc:
        raise TokenizerToolError(f"cannot read tokenizer model {path}: {exc.strerror or exc}") from None
    return parse_model_proto(data, str(path))


def parse_model_proto(data: bytes, source: str = "model") -> ModelProto:
    proto = ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf raises DecodeError or RuntimeError depending on the backend
        raise TokenizerToolError(f"{source}: not a SentencePiece model ({exc})") from None
    if not proto.pieces:
        raise TokenizerToolError(f"{source}: not a SentencePiece model (no pieces)")
    return proto


def save_model_proto(proto: ModelProto, path: str | Path) -> Path:
    """Write ``proto`` atomically after checking that SentencePiece itself can load it."""
    path = Path(path)
    data = proto.SerializeToString()
    processor_from_proto(proto)  # refuse to write a model the library would reject
    atomic_write_bytes(path, data)
    return path


def write_vocab_file(proto: ModelProto, path: str | Path) -> Path:
    """The human-readable ``.vocab`` companion: ``piece<TAB>score`` per line, as spm_train writes it."""
    lines = [f"{piece.piece}\t{piece.score:g}" for piece in proto.pieces]
    from data_tools.fileio import atomic_write_text

    atomic_write_text(Path(path), "\n".join(lines) + "\n")
    return Path(path)


def processor_from_proto(proto: ModelProto) -> spm.SentencePieceProcessor:
    """A SentencePieceProcessor for an in-memory proto (raises TokenizerToolError if spm rejects it)."""
    processor = spm.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(proto.SerializeToString())
    except (RuntimeError, OSError) as exc:
        raise TokenizerToolError(f"SentencePiece rejects the model: {_one_line(exc)}") from None
    return processor


def surface_processor(proto: ModelProto) -> spm.SentencePieceProcessor:
    """A copy of ``proto`` that encodes a piece's own surface text as it stands: the model's normaliser
    rules (e.g. NFKC) still apply, but no dummy prefix is added and whitespace is kept. "Does the piece's
    surface encode to that piece?" then answers "can this piece ever be produced?"."""
    raw = ModelProto()
    raw.CopyFrom(proto)
    spec = raw.normalizer_spec
    spec.add_dummy_prefix = False
    spec.remove_extra_whitespaces = False
    spec.escape_whitespaces = True
    return processor_from_proto(raw)


def surface_text(piece: str) -> str:
    """The text a piece stands for (``▁`` back to a space)."""
    return piece.replace(WHITESPACE, " ")


def model_type_name(proto: ModelProto) -> str:
    return _MODEL_TYPES.get(proto.trainer_spec.model_type, f"type{proto.trainer_spec.model_type}")



def text_characters(proto: ModelProto, pieces: Iterable[Piece] | None = None) -> set[str]:
    """Every character that occurs in a text-matchable piece (control/unknown/byte pieces excluded)."""
    chars: set[str] = set()
    for piece in proto.pieces if pieces is None else pieces:
        if piece.type in TEXT_PIECE_TYPES:
            chars.update(piece.piece)
    return chars


def truncated(proto: ModelProto, size: int) -> ModelProto:
    """The first ``size`` pieces with the same settings (the base of an extended model)."""
    if not 0 < size <= len(proto.pieces):
        raise TokenizerToolError(f"cannot truncate a {len(proto.pieces)}-piece model to {size} pieces")
    out = ModelProto()
    out.CopyFrom(proto)
    del out.pieces[size:]
    out.trainer_spec.vocab_size = size
    return out


def same_piece(a: Piece, b: Piece) -> bool:
    """Identical string, score (bitwise, as stored) and type."""
    return a.piece == b.piece and a.type == b.type and _score_bits(a.score) == _score_bits(b.score)


def _score_bits(score: float) -> bytes:
    import struct

    return struct.pack("<f", score)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
