"""The built-in `select` stage's logic: one candidate chosen among several for the same task,
by evidence, harm, behaviour, agreement and size (`rank`)."""
