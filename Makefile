# Convenience aliases; the scripts are the source of truth (they need only python3, pip and g++).
.PHONY: demo test install lint docker
demo:
	bash scripts/demo.sh
test:
	bash scripts/test.sh
install:
	bash scripts/install.sh
lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .
docker:
	docker build -f docker/Dockerfile -t hetero-ns3 .
