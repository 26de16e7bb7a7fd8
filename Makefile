# Berth — the two commands a newcomer needs are `make demo` and `make test`; both install everything first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
TOOLS  := .tools/bin/helm .tools/bin/kubectl
export PATH := $(CURDIR)/$(BIN):$(CURDIR)/.tools/bin:$(PATH)
export SPARK_LOCAL_IP := 127.0.0.1

.PHONY: install constraints java etcd promtool node faults tools lint typecheck imports test test-fast demo soak bench robustness mutants clean

## The venv holds exactly the versions constraints.txt pins (pyproject.toml gives the ranges; the pins, what passed).
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip -c constraints.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

## Pin every package at the newest release pyproject.toml's ranges admit (a fresh venv beside); then run make test.
constraints:
	scripts/refresh-constraints.sh $(PYTHON)

$(TOOLS): scripts/install_k8s_tools.py | $(STAMP)
	$(BIN)/python scripts/install_k8s_tools.py

java:
	scripts/ensure-java.sh

etcd:
	scripts/ensure-etcd.sh

promtool:
	scripts/ensure-promtool.sh

## The node tier's packages (containerd, runc, CNI plugins, buildah, debootstrap, busybox-static, iptables).
node:
	scripts/ensure-node.sh

## The robustness runs' fault tools (iproute2, iptables, e2fsprogs, util-linux, libfaketime).
faults:
	scripts/ensure-faults.sh

tools: $(TOOLS)

## Everything the tests need (the demo needs only the venv and Java: see demo).
install: $(STAMP) $(TOOLS) java etcd promtool node faults

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## The whole suite: lint, types, import layering, then every test (unit, http, e2e, operator, chart, pipeline).
## Two workers (pytest-xdist): each shared server's tests on one of them (tests/support/worker_groups.py).
PARALLEL := -n 2 --dist loadgroup --no-loadscope-reorder

test: install lint
	$(BIN)/python -m pytest -q $(PARALLEL) --durations=40

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not spark and not tools and not slow and not kube and not node"

## The main job on the embedded default: a local fleet showing static membership at work. It needs the venv and a
## Java runtime (for the Spark report at its end), nothing the tests alone use (etcd, promtool, helm, the node).
demo: $(STAMP) java
	$(BIN)/berth-demo

## Long runs kept out of `make test`.
soak: install
	BERTH_CRASH_ROUNDS=50 BERTH_CRASH_RESULTS=benchmarks/results/crash.json \
		$(BIN)/python -m pytest -q -p no:cacheprovider tests/http/test_crash.py
	BERTH_SIGNAL_HISTORIES=200 BERTH_SIGNAL_SEED=$(or $(SEED),3030) BERTH_SIGNAL_RESULTS=benchmarks/results/signals_berth.json \
		$(BIN)/python -m pytest -q -s -p no:cacheprovider tests/signals/test_berth_histories.py
	BERTH_KAFKA_SIGNAL_HISTORIES=200 BERTH_KAFKA_SIGNAL_BATCH=8 BERTH_KAFKA_SIGNAL_SEED=$(or $(SEED),3031) \
		BERTH_KAFKA_SIGNAL_RESULTS=benchmarks/results/signals_kafka.json \
		$(BIN)/python -m pytest -q -s -p no:cacheprovider tests/signals/test_kafka_histories.py
	BERTH_HA_ROUNDS=20 BERTH_HA_RESULTS=benchmarks/results/ha_campaign.json \
		$(BIN)/python -m pytest -q -p no:cacheprovider tests/ha/test_ha_campaign.py
	BERTH_SOAK=1 BERTH_NODE_HA_ROUNDS=5 BERTH_NODE_HA_RESULTS=benchmarks/results/ha_node.json \
		$(BIN)/python -m pytest -q -s -p no:cacheprovider tests/node/test_ha_failover.py
	BERTH_SOAK=1 BERTH_NODE_SCENARIO_ROUNDS=3 $(BIN)/python -m pytest -q -s -p no:cacheprovider \
		tests/node/test_drain.py tests/node/test_node_loss.py tests/node/test_kafka_drain.py \
		tests/node/test_spark_on_kubernetes.py tests/node/test_ha_node_loss.py tests/node/test_token_secret.py \
		tests/node/test_images.py
	BERTH_SOAK=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m soak \
		tests/kube/test_restarts_shown.py tests/pipeline/test_standalone_cluster.py tests/pipeline/test_class_data.py
	$(BIN)/python -m benchmarks.floods
	$(BIN)/python -m benchmarks.soak --minutes 10
	$(BIN)/python -m benchmarks.reliability

## Randomized fault runs checked against the models (tests/robustness): RUNS runs from SEED (default: at random,
## printed); the record accumulates in benchmarks/results/robustness.json. Then OPERATOR_RUNS scale-downs struck by
## a leader fault of the operator's (benchmarks/operator_robustness.py; benchmarks/results/robustness_operator.json).
## First the fixed-seed runs make test leaves out (marked soak); make test runs a fixed-seed few of each.
RUNS ?= 100
OPERATOR_RUNS ?= 50
robustness: install
	BERTH_SOAK=1 $(BIN)/python -m pytest -q -p no:cacheprovider -m soak \
		tests/robustness/test_runs.py tests/robustness/test_operator_leadership.py
	cd tests && ../$(BIN)/python -m robustness --runs $(RUNS) $(if $(SEED),--seed $(SEED))
	$(BIN)/python -m benchmarks.operator_robustness --runs $(OPERATOR_RUNS) $(if $(SEED),--seed $(SEED))

bench: install
	$(BIN)/python -m benchmarks

## The deliberate-bug check: each invariant that matters most broken on purpose in a copy of the tree, and the
## tests that name it must fail (scripts/mutants.py; about 2 minutes; docs/testing.md).
mutants: install
	$(BIN)/python scripts/mutants.py

clean:
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache build dist
