"""Everything written from results: grades.csv, per-student feedback (md, html) and results.json, the class
report. Pure functions of the gradebook's results, so any run (or a resumed one) rewrites them identically."""
