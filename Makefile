# Two commands do everything on a fresh clone: `make fuzz` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
EPFUZZ := $(VENV)/bin/epfuzz
FUZZ_TIME ?= 60
JOBS      ?= 1
HARNESS   ?= deepep_v2_dispatch
PRESET    ?=
SOAK_TIME ?= 1800

.PHONY: install fuzz test replay lint seeds bench bench-search soak rxe-vm vm-deps docs clean

# setuptools' build backend prints a 12-line "Editable installation" notice through pip's -q (folders named like
# the package in the working directory may shadow it: here that folder is the package); the filter matches that
# message alone, in pip's process and the backend's (a user trial read it as an error of make fuzz)
PIP := PYTHONWARNINGS='ignore:Editable installation' $(PY) -m pip

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PIP) install -q -e '.[dev,core]'
	touch $@

# the emulator's hot modules compiled with mypyc, beside their sources (issue 14); rebuilt when a source
# changes; a failed build prints one line and leaves the pure-Python emulator (epfuzz.core.native decides)
CORE_SRC := $(wildcard epfuzz/sim/*.py) epfuzz/protocols/opcheck.py epfuzz/ir/payload.py epfuzz/model/epoch.py epfuzz/model/oracle.py \
            epfuzz/search/featcore.py epfuzz/search/schedcore.py epfuzz/protocols/dispatch.py epfuzz/protocols/deep.py epfuzz/protocols/deep2.py \
            epfuzz/protocols/inband_tag.py epfuzz/protocols/shared_counter.py epfuzz/core/native.py epfuzz/core/corebuild.py \
            epfuzz/encoding/plancore.py epfuzz/ir/opmake.py \
            epfuzz/protocols/consmake.py epfuzz/protocols/dispatchops.py epfuzz/protocols/memread.py
$(VENV)/.core: $(VENV)/.installed $(CORE_SRC)
	$(PY) -m epfuzz.core.corebuild --best-effort
	touch $@

install: $(VENV)/.installed $(VENV)/.core

# exit 1 means "found something", which is what fuzzing a buggy protocol is for; the summary's replay
# commands name .venv/bin/epfuzz unless epfuzz is on PATH (`. .venv/bin/activate`)
fuzz: install
	$(EPFUZZ) fuzz $(HARNESS) --time $(FUZZ_TIME) --jobs $(JOBS) $(if $(PRESET),--preset $(PRESET)); rc=$$?; \
	  [ $$rc -eq 0 ] || [ $$rc -eq 1 ]

# the verbs backend's soft-RoCE guest needs QEMU, mmdebstrap and cpio (Debian packages); root installs them,
# without recommends (the GTK/SDL display, OVMF, ...: the guest is headless) and without upgrading what is there
VM_PACKAGES := qemu-system-x86 mmdebstrap cpio
vm-deps:
	@command -v qemu-system-x86_64 >/dev/null && command -v mmdebstrap >/dev/null && command -v cpio >/dev/null || \
	  { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	      echo "vm-deps: apt-get install --no-install-recommends $(VM_PACKAGES)"; \
	      apt-get update -q && apt-get install -y -q --no-install-recommends --no-upgrade $(VM_PACKAGES); \
	    else echo "vm-deps: not root or no apt-get: the verbs guest tests will be skipped"; fi; }

rxe-vm: install vm-deps
	$(EPFUZZ) vm build

test: install vm-deps docs
	$(VENV)/bin/ruff check epfuzz harnesses tests bench setup.py
	$(PY) -m mypy epfuzz
	$(PY) -m pytest -q -n auto -m "not guest"
	$(PY) -m pytest -q -m guest

# the documentation site (docs/, mkdocs.yml) into site/, warnings as errors: a broken link or anchor between
# pages or a page left out of the nav fails the build; the measured tables are rendered from bench/*.json while
# it builds (bench/docs_tables.py); plugins.md's API reference is in the markdown itself, written from the code
# (python -m epfuzz.protocols.apiref docs/plugins.md; tests/zoo/test_apiref.py fails when it is stale)
$(VENV)/.docs: $(VENV)/.installed
	$(PIP) install -q -e '.[dev,core,docs]'
	touch $@

docs: $(VENV)/.docs
	@$(PY) -m mkdocs build --strict --site-dir site > $(VENV)/docs.log 2>&1 || \
	  { grep -v '^INFO' $(VENV)/docs.log; echo "docs: the build failed (warnings are errors)"; exit 1; }
	@echo "docs: built site/ (mkdocs --strict: no warnings)"

# every input against its expected verdict (the case's, or corpus/<harness>.verdicts from `make seeds`).
# A case naming a plug-in (module:Attr, docs/tutorial.md section 3) is run only where allowed: ALLOW_PLUGINS lists
# the folders (or .py files) its module is in, `make replay ALLOW_PLUGINS=plugins`; without it the case is
# unreadable and replay fails. REGRESSIONS: the case folder(s) replayed beside the harness corpora
REGRESSIONS   ?= corpus/regressions
ALLOW_PLUGINS ?=
replay: install
	$(EPFUZZ) replay --strict $(REGRESSIONS) corpus/*_fuzzer $(foreach p,$(ALLOW_PLUGINS),--allow-plugins $(p))

seeds: install
	$(PY) -m epfuzz.continuous.seeds

bench: install
	$(PY) bench/run.py

# issue 27: guided vs the ClusterFuzzLite harness vs random vs the schedule sampler, both deep sets and the zoo,
# TRIALS trials per (bug, fuzzer), each at most EXECS executions (BUDGET seconds as a backstop), JOBS at a time
BUDGET ?= 300
TRIALS ?= 20
EXECS ?= 10000
bench-search: install
	$(PY) bench/search.py --execs $(EXECS) --budget $(BUDGET) --trials $(TRIALS) --jobs $(JOBS)

soak: install
	$(PY) bench/soak.py $(SOAK_TIME)

# every build output: the venv, the compiled core beside its sources, bytecode, wheels and the docs site
# (runs/ too: `make fuzz` writes there); the guest image's cache (~/.cache/epfuzz/vm) is outside the tree
clean:
	rm -rf $(VENV) runs build dist site .pytest_cache .ruff_cache .mypy_cache .hypothesis .cache .whl .gl .cudabuild
	rm -rf *.egg-info
	find . -path ./.git -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -path ./.git -prune -o -name '*.pyc' -type f -exec rm -f {} +
	find epfuzz -name '*.so' -delete
	rm -f epfuzz/_core_manifest.json
