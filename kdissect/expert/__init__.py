"""Expert analysis: findings about what went wrong in a capture, and the series that chart it.

`engine.Expert` feeds every decoded message (and every conversation's end) to the analyzers of
`analyzers.ANALYZERS`; each declares its kinds of finding (`catalogue.Kind`, as data), keeps
bounded state, and at the end returns its findings and its charts' numbers. `kdissect expert`
prints the findings; `kdissect report` draws the charts (kdissect/report/).
"""
