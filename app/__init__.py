"""The CoEvo-RSI dashboard: `data` loads (cached on the archive's version), `figures` builds plotly
figures, `components` holds shared widgets; the files in ../pages only draw."""
