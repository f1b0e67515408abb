# Sourced by the lab/*.sh: makes the plugin runnable on a GPU host without a package
# index. The checkout carries .whl/ (ruamel.yaml, pydantic and their needs, as wheels) and
# .carry/flashinfer-data.tar.xz (FlashInfer's kernel sources: data/{csrc/nv_internal, cutlass,
# cccl, spdlog, include} and a VERSION file).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# The host's Python installs are read-only and ship no bytecode: without a writable cache every
# process compiles torch's sources again (4.4 s for `import torch`, measured)
# (PYTHONDONTWRITEBYTECODE, set on this host, would keep it empty: measured 3.7 s of compile()
# in a cProfile of one cached verdict, and pytest then rewrites the asserts of every plugin
# module again in each process)
export PYTHONPYCACHEPREFIX=/tmp/pycache
unset PYTHONDONTWRITEBYTECODE
# What `pip install` does for an installed package, done once per host: the bytecode of torch, the
# carried wheels and the plugin, so that no timed process compiles it (a host's first pytest
# process otherwise starts in about 3 s instead of 1)
if [ ! -e /tmp/pycache/.compiled ]; then
  python3 -m compileall -q -j 0 "$(python3 -c 'import importlib.util as u; print(u.find_spec("torch").submodule_search_locations[0])')" \
    /tmp/site "$PWD/pytest_tileconform" > /dev/null && touch /tmp/pycache/.compiled
fi
if [ ! -d /tmp/fi/data ]; then mkdir -p /tmp/fi && tar -xJf .carry/flashinfer-data.tar.xz -C /tmp/fi; fi
export TILECONFORM_FLASHINFER_SOURCES=/tmp/fi/data TILECONFORM_CACHE_DIR=${TILECONFORM_CACHE_DIR:-/tmp/tccache}
# --noconftest: pytest run from the checkout would load tests/conftest.py, which moves the cache
plugins=(--noconftest -p pytest_tileconform.plugin -p pytest_tileconform.flashinfer.plugin -p no:cacheprovider)
