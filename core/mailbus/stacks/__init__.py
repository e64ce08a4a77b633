"""Real servers on loopback for tests, benchmarks and users' own tests: a throw-away
mail stack (`mailstack.MailStack`: Dovecot and Postfix, or a small SMTP relay into
Dovecot's LMTP where Postfix cannot run), a Spark standalone cluster with a Spark
Connect server (`spark_cluster.SparkProcesses`), and the bounded wait they start with
(`waiting.eventually`).

Each starts real processes from the system's packages (Dovecot, Postfix, Java) and
stops them by process id; certificates need trustme (the `test` extra), the cluster
pyspark (the `spark` extra), imported when a stack starts."""
