"""The words every layer shares, each defined once (no Django, no imports of the project)."""
