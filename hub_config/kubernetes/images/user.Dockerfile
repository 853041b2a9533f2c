# syntax=docker/dockerfile:1
# The user image: Jupyter's scipy-notebook with the Run as Job server extension, the
# JupyterLab extension (toolbar button, jobs panel, countdown, TensorBoard) and the in-job
# runner. User servers and Run as Job jobs both run from it (values.yaml singleuser.image,
# job-service.yaml KubernetesExecutor.image). Build from the repository's root:
#
#   docker build -f hub_config/kubernetes/images/user.Dockerfile \
#     -t registry.example.edu/campus-gpu-hub/user:0.1.0 .
ARG BASE_IMAGE=quay.io/jupyter/scipy-notebook:2025-12-31

# The wheel: setup.py builds the JupyterLab extension from labextension/, which needs
# Node.js 20 or newer (pip's build isolation brings jlpm).
FROM ${BASE_IMAGE} AS wheel
RUN mamba install --yes --quiet -c conda-forge 'nodejs>=20,<25' && mamba clean --all -f -y
COPY --chown=${NB_UID}:${NB_GID} . /tmp/campus-gpu-hub
RUN python -m pip wheel --no-deps --wheel-dir /tmp/dist /tmp/campus-gpu-hub

FROM ${BASE_IMAGE}
COPY --from=wheel /tmp/dist /tmp/dist
RUN wheel="$(ls /tmp/dist/campus_gpu_hub-*.whl)" \
    && python -m pip install --no-cache-dir "${wheel}[singleuser]" \
    && rm -rf /tmp/dist
# Fail the build, not the first login, when either extension is missing, or TensorBoard
# (the [singleuser] extra brings tensorboard, tensorboardX and jupyter-server-proxy).
RUN jupyter server extension list 2>&1 | grep -E 'jupyter_to_job .*enabled' \
    && jupyter labextension list 2>&1 | grep -E '@campus-gpu-hub/jupyter-to-job .*enabled' \
    && python -c 'import tensorboard, tensorboardX, jupyter_server_proxy'
