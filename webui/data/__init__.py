"""The Data tab: recordings to clips, proofreading, manifests, preparation for each generation."""
