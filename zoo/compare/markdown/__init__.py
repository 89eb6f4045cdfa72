"""report.md of each comparison, written from its report: `plain` (`zoo.compare.report`), `tuned`
(`zoo.compare.tune`) and `scaled` (`zoo.compare.scale`)."""
