# rlsweep's image for SageMaker training jobs and EC2 nodes (README: "A container image").
#
#   docker build -t rlsweep .
#
# A CUDA base (the host's NVIDIA container toolkit brings the driver), Python 3.12 in a venv on
# PATH, the system libraries Procgen's Qt runtime links, torch and rlsweep installed as on any
# machine with an index, SageMaker's training toolkit (its `train` command, which SageMaker
# runs, starts the job's sagemaker_program), and `rlsweep doctor` as the build's last step.
# /opt/ml/code stays empty: the toolkit extracts the job's source tree (--source-s3) only into
# an empty one. tests/test_dockerfile.py holds this file to rlsweep's declarations.

# CUDA 13.0, as PyPI's torch 2.13.0 wheel (which ships its own CUDA libraries): the base's CUDA
# only sets which drivers the container toolkit accepts (>= 580).
ARG BASE_IMAGE=nvidia/cuda:13.0.0-base-ubuntu24.04
FROM ${BASE_IMAGE}

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/rlsweep \
    PATH=/opt/rlsweep/bin:$PATH

# Python; rsync and ssh for Ray's cluster launcher on EC2 (it syncs files into the container
# with rsync, and the head's autoscaler reaches new workers over SSH from inside it).
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.12 python3.12-venv rsync openssh-client \
    && rm -rf /var/lib/apt/lists/*

# The system libraries of rlsweep.envs.qt.SYSTEM_LIBRARIES, exactly (Ubuntu 24.04's apt installs
# libglib2.0-0t64 for libglib2.0-0).
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libgl1 libglx0 libglvnd0 libglib2.0-0 libx11-6 libxcb1 libxau6 libxdmcp6 libbsd0 \
        libmd0 libpcre2-8-0 zlib1g \
    && rm -rf /var/lib/apt/lists/*

RUN python3.12 -m venv /opt/rlsweep && pip install --upgrade pip

# torch first and pinned (rlsweep/torch-pin.txt, which tests/test_dockerfile.py holds this default
# to), then rlsweep: README's install.
ARG TORCH=torch==2.13.0
RUN pip install "${TORCH}"
COPY . /tmp/rlsweep
WORKDIR /tmp/rlsweep
RUN pip install .

# SageMaker's training toolkit builds a C extension: the compiler lives only in this layer.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc python3.12-dev \
    && pip install sagemaker-training==5.1.4 \
    && apt-get purge -y --auto-remove gcc python3.12-dev \
    && rm -rf /var/lib/apt/lists/* \
    && pip check

WORKDIR /
RUN rm -rf /tmp/rlsweep && rlsweep doctor
