"""The Training tab: the form, pre-flight, the live run view, curves and samples."""
