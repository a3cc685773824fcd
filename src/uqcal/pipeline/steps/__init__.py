"""One module per pipeline step (`uqcal <step>`): what the step imports is exactly what its module imports.

`uqcal.cli` imports a step's module only when that step runs, so a job pays the start-up of its own
dependencies (a few hundred milliseconds for bookkeeping steps; torch and the method's libraries for
training), and the code a step depends on is the static import closure of its module (uqcal.records).
"""

__all__: list[str] = []  # run by the command line (`uqcal <step>`), not a library API
