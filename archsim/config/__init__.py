"""Configuration: YAML in, frozen typed objects out. Dicts end here."""
