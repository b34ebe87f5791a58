-- SQLite workload for the allocator benchmark: run as
--   sqlite3 -batch :memory: ".read sqlite.sql"
-- An order-history database is generated with a recursive CTE, indexed,
-- updated, aggregated and sorted. SQLite allocates its page cache, parse
-- trees, sorter runs and row values through malloc. The generated values
-- are deterministic (multiplicative hashing of the row number) so every
-- allocator does exactly the same work. Change the row count below.
PRAGMA cache_size = -65536;

CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL);
CREATE TABLE item(id INTEGER PRIMARY KEY, title TEXT NOT NULL, price REAL NOT NULL);
CREATE TABLE orders(
	id INTEGER PRIMARY KEY,
	customer_id INTEGER NOT NULL REFERENCES customer(id),
	item_id INTEGER NOT NULL REFERENCES item(id),
	qty INTEGER NOT NULL,
	note TEXT
);

BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
INSERT INTO customer
SELECT i, 'customer-' || printf('%05d', (i * 7919) % 100003),
       char(65 + i % 7) || char(65 + (i * 31) % 11)
FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 800)
INSERT INTO item
SELECT i, 'item ' || substr('abcdefghijklmnopqrstuvwxyz', 1 + i % 26, 1 + (i * 13) % 20) || ' #' || i,
       ((i * 2654435761) % 100000) / 100.0
FROM n;

WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO orders
SELECT i,
       1 + (i * 2654435761) % 5000,
       1 + (i * 40503) % 800,
       1 + (i * 97) % 20,
       CASE WHEN i % 3 = 0 THEN NULL
            ELSE printf('%.*c', 8 + (i * 7) % 56, 'x') || ' order ' || i END
FROM n;
COMMIT;

CREATE INDEX orders_by_customer ON orders(customer_id, item_id);
CREATE INDEX orders_by_note ON orders(note);

-- Churn: rewrite a tenth of the notes (longer), delete a twentieth.
UPDATE orders SET note = coalesce(note, '') || ' (amended ' || (id * 31) % 1000 || ')'
WHERE id % 10 = 4;
DELETE FROM orders WHERE id % 20 = 7;

-- Aggregations and sorts that do not fit an index.
CREATE TEMP TABLE spend AS
SELECT c.region AS region, c.name AS name, sum(o.qty * i.price) AS total, count(*) AS n
FROM orders o JOIN customer c ON c.id = o.customer_id JOIN item i ON i.id = o.item_id
GROUP BY c.id;

CREATE TEMP TABLE ranked AS
SELECT o.id AS id, o.qty * i.price AS value, o.note AS note
FROM orders o JOIN item i ON i.id = o.item_id
ORDER BY value DESC, note, id;

SELECT 'RESULT workload=sqlite'
       || ' orders=' || (SELECT count(*) FROM orders)
       || ' regions=' || (SELECT count(DISTINCT region) FROM spend)
       || ' top_value=' || (SELECT printf('%.2f', max(value)) FROM ranked)
       || ' distinct_notes=' || (SELECT count(DISTINCT note) FROM orders)
       || ' checksum=' || (SELECT sum(id % 977) FROM (SELECT id FROM ranked LIMIT 5000))
       || ' top_spender=' || (SELECT name FROM spend ORDER BY total DESC, name LIMIT 1);
