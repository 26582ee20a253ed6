# Two commands do everything on a fresh clone: `make fuzz` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
EPFUZZ := $(VENV)/bin/epfuzz
FUZZ_TIME ?= 60
JOBS      ?= 1
HARNESS   ?= deepep_v2_dispatch
PRESET    ?= spec

.PHONY: install fuzz test replay lint seeds bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# exit 1 means "found something", which is what fuzzing a buggy protocol is for
fuzz: install
	$(EPFUZZ) fuzz $(HARNESS) --time $(FUZZ_TIME) --jobs $(JOBS) --preset $(PRESET); rc=$$?; \
	  [ $$rc -eq 0 ] || [ $$rc -eq 1 ]

test: install
	$(VENV)/bin/ruff check epfuzz harnesses tests bench
	$(PY) -m pytest -q -n auto

replay: install
	$(EPFUZZ) replay corpus/regressions corpus/*_fuzzer

seeds: install
	$(PY) -m epfuzz.seeds

bench: install
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
