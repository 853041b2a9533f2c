# The hub image: Zero to JupyterHub's, with GPUSpawner and the course-sessions service.
FROM quay.io/jupyterhub/k8s-hub:4.4.0
USER root
COPY . /tmp/campus-gpu-hub
RUN python3 -m pip install --no-cache-dir '/tmp/campus-gpu-hub[hub]' && rm -rf /tmp/campus-gpu-hub
USER jovyan
