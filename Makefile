# Two entry points do all set-up on a fresh Debian machine with Python 3.11:
#   make demo   - create .venv, install everything, run the main demo
#   make test   - same set-up, run the test suite
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
DEMO_OUT ?= out/demo

.PHONY: demo test setup bench clean

setup: $(VENV)/.installed

# libusb is needed by pyrealsense2 (hardware extra, imported lazily but tested for its clear no-device error).
$(VENV)/.installed: pyproject.toml
	@ldconfig -p | grep -q libusb-1.0.so.0 || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq libusb-1.0-0)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: the CPU wheel on disk; any other version would download gigabytes.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test,hardware]'
	touch $@

demo: setup
	$(BIN)/python scripts/demo.py --out $(DEMO_OUT)

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python scripts/bench_twin.py
	$(BIN)/python scripts/bench_render.py
	$(BIN)/python scripts/bench_sensor.py
	$(BIN)/python scripts/bench_cameras.py
	$(BIN)/python scripts/bench_follower.py
	$(BIN)/python scripts/bench_loop.py
	$(BIN)/python scripts/bench_sync.py

clean:
	rm -rf $(VENV) out
