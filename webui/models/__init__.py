"""The Models tab: Hub downloads and uploads."""
