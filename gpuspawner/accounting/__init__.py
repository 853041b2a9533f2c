"""GPU-hour accounting: the usage record, budgets and usage reports.

Design notes: docs/design/accounting.md, "gpuspawner.accounting.__init__".
"""
