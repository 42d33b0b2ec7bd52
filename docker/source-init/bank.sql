-- The bank schema of dags/example_bank.py (the same as scripts/demo.py loads), run once by the
-- postgres image on an empty data directory.
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
CREATE TABLE transfers (id bigserial PRIMARY KEY, src int NOT NULL, dst int NOT NULL, amount bigint NOT NULL);
INSERT INTO accounts SELECT g, 1000 FROM generate_series(1, 20) g;
