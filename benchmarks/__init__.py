"""Speed benchmarks of the hub's policy code, each against an anchor measured in the same run.

Run them all with ``make bench`` (``python -m benchmarks``); see README.md here.
"""
