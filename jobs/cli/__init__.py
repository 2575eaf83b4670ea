"""The job CLI, `python -m jobs` (jobs/__main__.py): the parser and main (`main`), the checks (`checks`: validate,
preflight), submitting, following, listing and stopping jobs (`follow`), the run's status, plot and export
(`runs`), the stack's jobs as the commands pick and show them (`stack_jobs`), and the text it writes (`lines`)."""
