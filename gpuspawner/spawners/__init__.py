"""The hub's spawners: GPUSpawner on Kubernetes (``kubernetes``), LocalGPUSpawner on one
machine (``local``), the course-profile glue both share, their pages and the cluster queues.
"""
