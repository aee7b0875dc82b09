#!/usr/bin/env bash
# CI's torch pass: the multi-rank runtime, session, train-CLI and torch integration tests under the
# oldest torch we support and the newest release that installs here, each in its own venv.
#
#   .ci/torch_matrix.sh                      # torch 2.11.0 and 2.14.1
#   GT_TORCH_VERSIONS="2.12.0" .ci/torch_matrix.sh
#
# Each venv lives under $GT_TORCH_VENV_ROOT (default: a new temporary folder, removed at exit, so every
# run installs from pyproject.toml alone); name a folder of your own to reuse its venvs between runs
# (pip still checks the pins). pip's cache is used either way.
# TORCH_INDEX_URL (optional) adds an index for torch wheels (e.g. https://download.pytorch.org/whl/cpu).
# Exit status: 0 only when every version installed and its tests passed.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PYTHON=${PYTHON:-python3}
VERSIONS=${GT_TORCH_VERSIONS:-"2.11.0 2.14.1"}
if [ -n "${GT_TORCH_VENV_ROOT:-}" ]; then
  VENV_ROOT=$GT_TORCH_VENV_ROOT
else
  VENV_ROOT=$(mktemp -d)
  trap 'rm -rf "$VENV_ROOT"' EXIT
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# The tests the torch build can break: everything that starts ranks, checkpoints, compiles or trains.
TESTS=(
  tests/runtime/test_harness.py
  tests/runtime/test_layouts.py
  tests/runtime/test_hybrid_layouts.py
  tests/runtime/test_moe.py
  tests/runtime/test_checkpoint.py
  tests/runtime/test_fast_path.py
  tests/runtime/test_precision_and_stages.py
  tests/runtime/test_session_hooks.py
  tests/runtime/test_mesh_planner.py
  tests/runtime/test_fault_tolerance.py
  tests/engine/test_multirank.py
  tests/session/test_session_multirank.py
  tests/session/test_session.py
  tests/cli/test_train.py
  tests/integrations/test_hf.py
  tests/integrations/test_hf_ddp.py
  tests/integrations/test_accelerate.py
  tests/integrations/test_lightning.py
)

failed=()
summary=()
for version in $VERSIONS; do
  venv="$VENV_ROOT/torch-$version"
  printf '\n==================== torch %s (venv %s) ====================\n' "$version" "$venv"
  t0=$(date +%s)
  index=()
  [ -n "${TORCH_INDEX_URL:-}" ] && index=(--extra-index-url "$TORCH_INDEX_URL")
  # A venv without system site-packages, so an undeclared dependency fails here too.
  if ! { [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"; } ||
     ! "$venv/bin/python" -m pip install -q "${index[@]}" "torch==$version" -e "$REPO[dev]"; then
    echo "torch $version: INSTALL FAILED"
    failed+=("$version (install)"); summary+=("torch $version: install failed"); continue
  fi
  got=$("$venv/bin/python" -c 'import torch; print(torch.__version__)')
  if [ "${got%%+*}" != "$version" ]; then
    echo "torch $version: the venv has torch $got"
    failed+=("$version (got $got)"); summary+=("torch $version: wrong torch $got"); continue
  fi
  t1=$(date +%s)
  echo "torch $got installed in $((t1 - t0)) s; running ${#TESTS[@]} test files"
  # PYTHONPATH: the repository's greentrain and tests package, whatever the caller's environment says.
  PYTHONPATH="$REPO" "$venv/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}"
  rc=$?
  t2=$(date +%s)
  status=passed; [ $rc -eq 0 ] || { status="FAILED (pytest exit $rc)"; failed+=("$version"); }
  summary+=("torch $got: install $((t1 - t0)) s, tests $((t2 - t1)) s, $status")
done

printf '\n==================== torch matrix summary ====================\n'
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "torch matrix: failed for ${failed[*]}"
  exit 1
fi
echo "torch matrix: all passed"
