"""`python -m apron.cli`: the same command line as `apron`."""

from apron.cli import entry

entry()
