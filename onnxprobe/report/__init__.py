"""Reports: JSON-ready dicts and Rich renderings. Pure functions of result data; no computation."""
