//! SQLite and Postgres storage backends for the apiserver framework (in progress).
