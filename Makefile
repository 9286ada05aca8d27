# Myolotrain v4. `make demo` runs the main job on the local stack; `make test` runs the whole suite
# (a real Kafka broker included). Both set up everything they need on a fresh machine.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml setup.py | sha1sum | cut -c1-12)
APT_PACKAGES := kcat openjdk-17-jre-headless maven golang-go

.PHONY: help venv sysdeps test test-unit test-integration chaos soak fuzz bench demo lint format clean

help:  ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

venv: $(STAMP)  ## Create .venv and install myolotrain with the [train,dev,otlp] extras

$(STAMP): pyproject.toml setup.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[train,dev,otlp]"
	@rm -f $(VENV)/.installed-*; touch $@

sysdeps:  ## Install Java 17, Maven, kcat, Go (it builds Toxiproxy), Prometheus and Chromium (with its driver) from Debian's packages when missing (needs root)
	@missing=""; \
	command -v kcat >/dev/null || missing="$$missing kcat"; \
	command -v prometheus >/dev/null && command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v go >/dev/null || test -x /usr/local/go/bin/go || missing="$$missing golang-go"; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	command -v mvn  >/dev/null || missing="$$missing maven"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; fi; \
	fi

# The unit tests run in TEST_JOBS processes (pytest-xdist); the integration tests one at a time, as each
# starts a stack of processes that uses every core and waits on wall-clock deadlines.
TEST_JOBS ?= 2

test: venv sysdeps  ## Run the whole suite: the unit tests in TEST_JOBS (2) processes, then integration (a real Kafka broker)
	@unit=0; integration=0; \
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_JOBS) tests/unit || unit=$$?; \
	$(BIN)/pytest -q -p no:cacheprovider tests/integration || integration=$$?; \
	echo "unit tests: exit $$unit; integration tests: exit $$integration"; \
	test $$unit = 0 && test $$integration = 0

test-unit: venv  ## Only the unit tests (no broker), in TEST_JOBS processes
	$(BIN)/pytest -q -n $(TEST_JOBS) tests/unit

test-integration: venv sysdeps  ## Only the integration tests
	$(BIN)/pytest -q tests/integration

chaos: venv sysdeps  ## The chaos test at full length: an upgrade and a job through Toxiproxy for MYOLO_CHAOS_S (300) s
	MYOLO_CHAOS_S=$${MYOLO_CHAOS_S:-300} $(BIN)/pytest -q -s -p no:cacheprovider --timeout=0 \
	  tests/integration/coordinator/test_chaos.py

soak: venv sysdeps  ## The soak (not in `make test`): faults every ~2 min for MYOLO_SOAK_S (1800) s; loses nothing
	$(BIN)/python -m tests.soak

fuzz: venv  ## Property-test the consumer on MYOLO_FUZZ_EXAMPLES hostile records (default 1000000: long, niced)
	MYOLO_FUZZ_EXAMPLES=$${MYOLO_FUZZ_EXAMPLES:-1000000} nice -n 19 $(BIN)/pytest -q -s -p no:cacheprovider \
	  --timeout=0 tests/unit/events/bus/test_fuzz_consumer.py

bench: venv sysdeps  ## Run the benchmarks; JSON results in tests/benchmarks/results/
	$(BIN)/python -m tests.benchmarks

demo: venv sysdeps  ## Start the local stack and show events flowing through it
	$(BIN)/python -m myolo.coordinator.localstack.demo

lint:  ## ruff check + format check
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format:
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

clean:  ## Stop the local stack and remove build leftovers (keeps .venv and the Kafka jar cache)
	-$(BIN)/myoloctl local down --clean
	rm -rf build dist *.egg-info .pytest_cache tests/benchmarks/results
