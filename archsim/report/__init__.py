"""Reports: rich tables, JSON/CSV export. Files are written only here and in the CLI."""
