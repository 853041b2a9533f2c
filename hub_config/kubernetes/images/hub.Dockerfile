# syntax=docker/dockerfile:1
# The hub image: Zero to JupyterHub's, with GPUSpawner, the course-sessions service and the
# Run as Job service (job-service.yaml runs it from this image too). Build from the
# repository's root:
#
#   docker build -f hub_config/kubernetes/images/hub.Dockerfile \
#     -t registry.example.edu/campus-gpu-hub/hub:0.1.0 .

# The wheel, built where Node.js is at hand (setup.py builds the JupyterLab extension into
# every wheel; the hub does not use it, but one wheel serves both images).
FROM quay.io/jupyter/scipy-notebook:2025-12-31 AS wheel
RUN mamba install --yes --quiet -c conda-forge 'nodejs>=20,<25' && mamba clean --all -f -y
COPY --chown=${NB_UID}:${NB_GID} . /tmp/campus-gpu-hub
RUN python -m pip wheel --no-deps --wheel-dir /tmp/dist /tmp/campus-gpu-hub

FROM quay.io/jupyterhub/k8s-hub:4.4.0
USER root
COPY --from=wheel /tmp/dist /tmp/dist
RUN wheel="$(ls /tmp/dist/campus_gpu_hub-*.whl)" \
    && python3 -m pip install --no-cache-dir "${wheel}[hub]" \
    && rm -rf /tmp/dist
USER jovyan
