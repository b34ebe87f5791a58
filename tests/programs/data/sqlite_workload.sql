-- sqlite_workload.sql — generated insert/index/sort workload for sqlite3.test.
-- Rows come from recursive CTEs; every query prints deterministic results.
PRAGMA cache_size = -20000;
PRAGMA temp_store = MEMORY;
CREATE TABLE people(id INTEGER PRIMARY KEY, name TEXT, dept INTEGER, salary INTEGER, note TEXT);
CREATE TABLE depts(id INTEGER PRIMARY KEY, title TEXT);

BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO people
SELECT i,
       'person' || ((i * 7919) % 50021),
       (i * 31) % 97,
       1000 + (i * 104729) % 90000,
       substr(printf('%08x-%d-', i * 2654435761 % 4294967296, i) ||
              replace(printf('%.*c', 10 + i % 90, 'x'), 'x', char(97 + i % 26)), 1, 120)
FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 96)
INSERT INTO depts SELECT i, 'department ' || i FROM n;
COMMIT;

SELECT 'rows', count(*), sum(salary), max(length(note)) FROM people;

CREATE INDEX people_dept_salary ON people(dept, salary);
CREATE INDEX people_name ON people(name);
CREATE INDEX people_note ON people(note);

SELECT 'top dept', d.title, count(*), avg(p.salary)
FROM people p JOIN depts d ON d.id = p.dept
GROUP BY p.dept ORDER BY avg(p.salary) DESC, p.dept LIMIT 5;

SELECT 'sorted', name, salary FROM people ORDER BY note DESC, id LIMIT 5;
SELECT 'sorted by expr', id FROM people ORDER BY (salary * 37 + id) % 1009, id LIMIT 5;
SELECT 'distinct names', count(DISTINCT name) FROM people;
SELECT 'like', count(*) FROM people WHERE note LIKE '%-1234%';
SELECT 'window', id, salary, rank() OVER (PARTITION BY dept ORDER BY salary DESC, id)
FROM people WHERE dept = 42 ORDER BY salary DESC, id LIMIT 5;
SELECT 'group_concat', dept, length(group_concat(name, ',')) FROM people GROUP BY dept ORDER BY dept LIMIT 3;

-- Updates and deletes churn the b-trees and free pages.
BEGIN;
UPDATE people SET note = note || '-updated-' || id WHERE id % 3 = 0;
DELETE FROM people WHERE id % 5 = 0;
UPDATE people SET salary = salary + 17 WHERE dept IN (SELECT id FROM depts WHERE id % 2 = 1);
COMMIT;
SELECT 'after churn', count(*), sum(salary), sum(length(note)) FROM people;

-- A self join and a sort that needs a temporary b-tree.
SELECT 'self join', count(*) FROM people a JOIN people b ON a.name = b.name AND a.id < b.id;
SELECT 'sum of hashes', sum(length(h)) FROM (SELECT hex(name || note) AS h FROM people ORDER BY h LIMIT 50000);

-- JSON functions (json1 is built in).
SELECT 'json', json_extract(j, '$.n[3]'), json_array_length(j, '$.n')
FROM (SELECT json_object('n', json_group_array(id)) AS j FROM (SELECT id FROM people WHERE dept = 7 ORDER BY id));

CREATE TABLE copy AS SELECT * FROM people ORDER BY random();
SELECT 'copy', count(*) FROM copy;
DROP TABLE copy;
VACUUM;
PRAGMA integrity_check;
