"""Test strength (issue 44): how many wrong kernels a suite's own tests accept, beside the
toolkit's hidden cases, measured with seeded operator-level mutants of each expert kernel.

`mutate.py` makes the mutants (on the source's AST, no model involved), `stress.py` draws the
larger seeded case sets that serve as ground truth and as the differential check for
equivalent mutants, `report.py` holds the records, the mutation scores with Wilson intervals,
the table, the CSV and the figure. Judging them needs the judge, a layer above bench: that is
runners/strength.py.
"""
