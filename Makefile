# Everything runs in .venv, created on first use with the machine's python3 (3.11 or newer).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
STUDENT_STAMP := $(VENV)/.installed-student

.PHONY: demo test lint release dist install install-student clean

demo: $(STAMP)  ## build the release, grade three sample students, print the grade table
	$(BIN)/scaling-course demo

test: $(STAMP)  ## the whole test suite, one test file at a time on each core
	$(BIN)/python -m pytest -n auto --dist loadfile --no-loadscope-reorder

lint: $(STAMP)
	$(BIN)/ruff check .

release: $(STAMP)  ## regenerate release/ and the self-check data from source/
	$(BIN)/scaling-course release

dist: $(STAMP)  ## dist/student/ and dist/grader/: the wheels of this version (docs/grading.md)
	$(BIN)/scaling-course dist student
	$(BIN)/scaling-course dist grader

install: $(STAMP)  ## the developers' install: the package with the test tools (make test, .ci/run)

install-student: $(STUDENT_STAMP)  ## a learner's install: the package alone, notebooks, selfcheck and progress

$(STUDENT_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(STUDENT_STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
