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

# libusb is needed by pyrealsense2 (hardware extra, imported lazily but tested for its clear no-device error);
# chromium is the headless browser the teleoperation page test drives (playwright, never its own browser download).
$(VENV)/.installed: pyproject.toml constraints/isaaclab-3.0.txt
	@ldconfig -p | grep -q libusb-1.0.so.0 || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq libusb-1.0-0)
	@command -v chromium >/dev/null || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# Every version follows Isaac Lab 3.0 (constraints file); torch 2.13.0 is the CPU wheel on disk, any other
	# version would download gigabytes.
	$(BIN)/pip install -q -c constraints/isaaclab-3.0.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints/isaaclab-3.0.txt -e '.[test,usd,isaaclab,hardware,eval]'
	# Isaac Lab 3.0 kit-less (no Isaac Sim): it declares Python >= 3.12 and Kit/GPU/training dependencies that
	# kit-less use on the Newton backend does not import; its runtime set is our [isaaclab] extra.
	$(BIN)/pip install -q --no-deps --ignore-requires-python -c constraints/isaaclab-3.0.txt isaaclab==3.0.0
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
	$(BIN)/python scripts/bench_ik.py
	$(BIN)/python scripts/bench_policy.py
	$(BIN)/python scripts/bench_scene.py

clean:
	rm -rf $(VENV) out
