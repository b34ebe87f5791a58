<?php
// php.test: string and array work, and the extensions Debian's php loads
// with dlopen(RTLD_DEEPBIND) when they are there (json is built in).
$a = [];
for ($i = 0; $i < 100000; $i++) {
    $a["k$i"] = str_repeat(chr(65 + $i % 26), $i % 97) . sprintf("%05d", $i);
}
$total = 0;
foreach ($a as $k => $v) {
    $total += strlen($v);
}
$b = array_map(fn($x) => strrev($x), array_slice($a, 0, 30000));
usort($b, fn($x, $y) => strcmp($x, $y));
$words = explode(" ", str_repeat("alpha beta gamma delta ", 20000));
$count = array_count_values($words);
ksort($count);
$j = json_encode(array_slice($a, 0, 2000));
$d = json_decode($j, true);
preg_match_all('/k(\d+)/', implode(",", array_keys(array_slice($a, 0, 5000))), $m);
$s = serialize($d);
$u = unserialize($s);
echo "total $total, sorted ", count($b), ", first ", substr($b[0], 0, 12), "\n";
echo "words ", json_encode($count), ", json ", strlen($j), ", matches ", count($m[1]), "\n";
echo "serialize ", md5($s), ", round trip ", $u === $d ? "equal" : "different", "\n";
if (function_exists('mb_strtoupper')) {
    echo "mbstring ", mb_strtoupper("grüße, ĳssel"), " ", mb_strlen(str_repeat("ü", 1000)), "\n";
}
if (class_exists('SimpleXMLElement')) {
    $x = new SimpleXMLElement('<r>' . str_repeat('<a n="1">text</a>', 1000) . '</r>');
    echo "xml ", count($x->a), " ", strlen($x->asXML()), "\n";
}
if (class_exists('DOMDocument')) {
    $dom = new DOMDocument();
    $dom->loadXML('<r>' . str_repeat('<b>x</b>', 500) . '</r>');
    echo "dom ", $dom->getElementsByTagName('b')->length, "\n";
}
if (function_exists('iconv')) {
    echo "iconv ", bin2hex(iconv("UTF-8", "ISO-8859-1", "grüße")), "\n";
}
if (class_exists('PDO') && in_array('sqlite', PDO::getAvailableDrivers())) {
    $db = new PDO('sqlite::memory:');
    $db->exec('create table t (k text, v integer)');
    $st = $db->prepare('insert into t values (?, ?)');
    for ($i = 0; $i < 2000; $i++) $st->execute(["k$i", $i]);
    echo "pdo ", $db->query('select sum(v) from t')->fetchColumn(), "\n";
}
