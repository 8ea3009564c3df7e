"""The Listen tab: A/B and blind listening tests."""
