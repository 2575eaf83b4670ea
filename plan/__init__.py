"""The offline plan: the real program run under Pulumi's mocks, recorded and written to files."""
