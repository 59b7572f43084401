"""`kdissect report`: the expert's findings and charts as one self-contained HTML page
(docs/report.md). `html.render` builds the page; `figures` turns the charts' numbers into
Plotly figures; `data` reads the untrusted chart data safely."""
