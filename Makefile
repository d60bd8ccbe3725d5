# Two commands do all the set-up on a fresh machine (see README.md):
#   make demo   docs/rebuild-from-the-start.md, narrated, on the test bed
#   make test   every test, the end-to-end ones on the test bed
#   make dist   release archives, install.yaml, krew manifest and checksums in target/dist
#   make lint   rustfmt, clippy, and actionlint on .github/workflows (what CI runs first)
#   make image  the operator's image, built from scratch here (target/image)
.PHONY: demo test lint testbed-up testbed-down dist image

demo:
	scripts/demo.sh

test:
	scripts/test.sh

lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	scripts/actionlint.sh

testbed-up:
	testbed/tb up

testbed-down:
	testbed/tb down

dist:
	scripts/dist.sh

image:
	scripts/image.sh
