# The two set-up commands of the README: `make demo` and `make test`. Each builds its own
# virtual environment on a fresh machine (base install for the demo, + TensorFlow CPU for tests).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q

.PHONY: demo test bench clean fake-nvml

$(VENV)/.installed-base: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed-base pyproject.toml
	$(PIP) install -e '.[tf-cpu,test]'
	touch $@

demo: $(VENV)/.installed-base
	$(VENV)/bin/gputopo scan --machine dgx1
	$(VENV)/bin/gputopo recommend --machine dgx1 --gpus 4

test: $(VENV)/.installed-test
	$(VENV)/bin/lint-imports --no-logo --no-cache
	$(PY) -m pytest -q

bench: $(VENV)/.installed-test
	for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

# A fake libnvidia-ml.so.1 answering from a snapshot (docs/nvml.md): no GPU needed to see what
# `gputopo scan` prints on a DGX through NVIDIA's real Python binding.
FAKE_NVML_CFLAGS := -shared -fPIC -O1 -std=c11 -Wall -Wextra -fvisibility=hidden -Wl,-soname,libnvidia-ml.so.1
fake-nvml: build/fake-nvml/libnvidia-ml.so.1

build/fake-nvml/libnvidia-ml.so.1: tests/fake_libnvml/fake_nvml.c
	mkdir -p $(@D)
	$(CC) $(FAKE_NVML_CFLAGS) -o $@ $<
