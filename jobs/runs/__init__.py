"""The run as the client sees it: goodput and dollars, the run's files and record, the plot, the export's submission."""
