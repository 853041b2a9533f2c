"""Campus GPU hub: course-time GPU profiles and GPU shares for JupyterHub.

Design notes: docs/design/hub.md, "gpuspawner.__init__".
"""

__version__ = "0.1.0"
