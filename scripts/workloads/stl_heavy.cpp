// An STL-heavy translation unit for the compiler benchmark: the allocator
// under test runs inside g++ (cc1plus), which allocates heavily for its
// trees and template instantiations. The program is a small but complete
// log analyser (tokenising with streams and string_view, a JSON-like
// document model with std::variant, grouping with ordered and unordered
// maps, shortest paths with a priority queue) so that the instantiations
// are the kind real code produces. It also builds and runs:
// g++ -O1 stl_heavy.cpp && ./a.out
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

namespace doc {

// A JSON-like value. std::vector and std::map of an incomplete type are
// fine in libstdc++ (vector officially since C++17).
struct Value;
using Array = std::vector<Value>;
using Object = std::map<std::string, Value>;

struct Value {
	std::variant<std::nullptr_t, bool, double, std::string, Array, Object> v;

	Value() : v(nullptr) {}
	Value(bool b) : v(b) {}
	Value(double d) : v(d) {}
	Value(int i) : v(static_cast<double>(i)) {}
	Value(std::string s) : v(std::move(s)) {}
	Value(const char *s) : v(std::string(s)) {}
	Value(Array a) : v(std::move(a)) {}
	Value(Object o) : v(std::move(o)) {}
};

template <class... F> struct overload : F... { using F::operator()...; };
template <class... F> overload(F...) -> overload<F...>;

void dump(std::ostream &os, const Value &val, int indent = 0)
{
	std::visit(overload{
		[&](std::nullptr_t) { os << "null"; },
		[&](bool b) { os << (b ? "true" : "false"); },
		[&](double d) { os << d; },
		[&](const std::string &s) { os << std::quoted(s); },
		[&](const Array &a) {
			os << '[';
			for (std::size_t i = 0; i < a.size(); ++i) {
				if (i)
					os << ", ";
				dump(os, a[i], indent + 1);
			}
			os << ']';
		},
		[&](const Object &o) {
			os << "{\n";
			bool first = true;
			for (const auto &[k, v] : o) {
				if (!first)
					os << ",\n";
				first = false;
				os << std::string(2 * (indent + 1), ' ') << std::quoted(k) << ": ";
				dump(os, v, indent + 1);
			}
			os << '\n' << std::string(2 * indent, ' ') << '}';
		},
	}, val.v);
}

std::size_t count_nodes(const Value &val)
{
	return std::visit(overload{
		[](const Array &a) {
			return std::accumulate(a.begin(), a.end(), std::size_t{1},
					       [](std::size_t n, const Value &x) { return n + count_nodes(x); });
		},
		[](const Object &o) {
			std::size_t n = 1;
			for (const auto &kv : o)
				n += count_nodes(kv.second);
			return n;
		},
		[](const auto &) { return std::size_t{1}; },
	}, val.v);
}

} // namespace doc

namespace logs {

struct Entry {
	std::string time, level, service, message;
	std::optional<double> latency_ms;
	std::map<std::string, std::string> fields;
};

// "2024-05-01T10:00:00 INFO api: request done latency=12.5ms user=bob"
std::optional<Entry> parse(const std::string &line)
{
	static const std::set<std::string, std::less<>> levels{"DEBUG", "INFO", "WARN", "ERROR"};
	std::istringstream is(line);
	Entry e;
	if (!(is >> e.time >> e.level >> e.service) || !levels.count(e.level) ||
	    e.service.empty() || e.service.back() != ':')
		return std::nullopt;
	e.service.pop_back();
	std::getline(is >> std::ws, e.message);
	std::string_view rest(e.message);
	while (!rest.empty()) {
		auto sp = rest.find(' ');
		std::string_view tok = rest.substr(0, sp);
		rest = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
		auto eq = tok.find('=');
		if (eq == std::string_view::npos || eq == 0)
			continue;
		std::string key(tok.substr(0, eq)), val(tok.substr(eq + 1));
		if (key == "latency" && val.size() > 2 && val.compare(val.size() - 2, 2, "ms") == 0)
			e.latency_ms = std::stod(val.substr(0, val.size() - 2));
		e.fields.emplace(std::move(key), std::move(val));
	}
	return e;
}

// A small generic table: group rows by a key and fold each group.
template <class Row, class Key, class Acc>
class GroupBy {
public:
	using KeyFn = std::function<Key(const Row &)>;
	using FoldFn = std::function<void(Acc &, const Row &)>;

	GroupBy(KeyFn key, FoldFn fold) : key_(std::move(key)), fold_(std::move(fold)) {}

	void add(const Row &r) { fold_(groups_[key_(r)], r); }

	using Less = std::function<bool(const Acc &, const Acc &)>;

	std::vector<std::pair<Key, Acc>> sorted_by(Less less) const
	{
		std::vector<std::pair<Key, Acc>> out(groups_.begin(), groups_.end());
		std::stable_sort(out.begin(), out.end(),
				 [&](const auto &a, const auto &b) { return less(a.second, b.second); });
		return out;
	}

private:
	KeyFn key_;
	FoldFn fold_;
	std::unordered_map<Key, Acc> groups_;
};

struct Stats {
	std::size_t n = 0;
	double sum = 0, max = 0;
	std::multiset<double> samples;

	double percentile(double p) const
	{
		if (samples.empty())
			return 0;
		auto it = samples.begin();
		std::advance(it, static_cast<std::ptrdiff_t>(p * static_cast<double>(samples.size() - 1)));
		return *it;
	}
};

} // namespace logs

namespace graph {

// Service call graph with latencies as edge weights.
class Graph {
public:
	void edge(const std::string &a, const std::string &b, double w)
	{
		adj_[a].emplace_back(b, w);
		adj_[b];
	}

	std::map<std::string, double> dijkstra(const std::string &src) const
	{
		using Item = std::pair<double, std::string>;
		std::priority_queue<Item, std::vector<Item>, std::greater<>> pq;
		std::map<std::string, double> dist;
		for (const auto &kv : adj_)
			dist[kv.first] = std::numeric_limits<double>::infinity();
		dist[src] = 0;
		pq.emplace(0, src);
		while (!pq.empty()) {
			auto [d, u] = pq.top();
			pq.pop();
			if (d > dist[u])
				continue;
			for (const auto &[v, w] : adj_.at(u))
				if (d + w < dist[v]) {
					dist[v] = d + w;
					pq.emplace(dist[v], v);
				}
		}
		return dist;
	}

	std::vector<std::string> topo_order() const
	{
		std::unordered_map<std::string, int> indeg;
		for (const auto &[u, es] : adj_) {
			indeg.try_emplace(u, 0);
			for (const auto &e : es)
				++indeg[e.first];
		}
		std::deque<std::string> q;
		for (const auto &[u, d] : indeg)
			if (d == 0)
				q.push_back(u);
		std::vector<std::string> out;
		while (!q.empty()) {
			std::string u = q.front();
			q.pop_front();
			out.push_back(u);
			for (const auto &e : adj_.at(u))
				if (--indeg[e.first] == 0)
					q.push_back(e.first);
		}
		return out;
	}

private:
	std::unordered_map<std::string, std::vector<std::pair<std::string, double>>> adj_;
};

} // namespace graph

namespace {

// Polymorphic report sinks, owned through unique_ptr.
struct Sink {
	virtual ~Sink() = default;
	virtual void row(const std::vector<std::string> &cells) = 0;
	virtual std::string finish() = 0;
};

struct CsvSink final : Sink {
	std::ostringstream os;
	void row(const std::vector<std::string> &cells) override
	{
		for (std::size_t i = 0; i < cells.size(); ++i)
			os << (i ? "," : "") << cells[i];
		os << '\n';
	}
	std::string finish() override { return os.str(); }
};

struct TableSink final : Sink {
	std::vector<std::vector<std::string>> rows;
	void row(const std::vector<std::string> &cells) override { rows.push_back(cells); }
	std::string finish() override
	{
		std::vector<std::size_t> width;
		for (const auto &r : rows)
			for (std::size_t i = 0; i < r.size(); ++i) {
				width.resize(std::max(width.size(), r.size()));
				width[i] = std::max(width[i], r[i].size());
			}
		std::ostringstream os;
		for (const auto &r : rows) {
			for (std::size_t i = 0; i < r.size(); ++i)
				os << std::left << std::setw(static_cast<int>(width[i] + 2)) << r[i];
			os << '\n';
		}
		return os.str();
	}
};

std::vector<std::string> synth_log(std::size_t n)
{
	const std::vector<std::string> services{"api", "auth", "db", "cache", "search", "billing"};
	const std::vector<std::string> levels{"DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR"};
	std::vector<std::string> out;
	out.reserve(n);
	std::uint64_t x = 88172645463325252ULL;
	for (std::size_t i = 0; i < n; ++i) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		std::ostringstream os;
		os << "2024-05-01T10:" << std::setw(2) << std::setfill('0') << (i / 60) % 60 << ':'
		   << std::setw(2) << i % 60 << ' ' << levels[x % levels.size()] << ' '
		   << services[(x >> 8) % services.size()] << ": request done latency="
		   << (x >> 16) % 500 / 10.0 << "ms user=u" << (x >> 32) % 97;
		out.push_back(os.str());
	}
	return out;
}

} // namespace

int main()
{
	std::vector<logs::Entry> entries;
	for (const auto &line : synth_log(2000))
		if (auto e = logs::parse(line))
			entries.push_back(std::move(*e));

	logs::GroupBy<logs::Entry, std::string, logs::Stats> by_service(
		[](const logs::Entry &e) { return e.service; },
		[](logs::Stats &s, const logs::Entry &e) {
			double l = e.latency_ms.value_or(0);
			++s.n, s.sum += l, s.max = std::max(s.max, l);
			s.samples.insert(l);
		});
	logs::GroupBy<logs::Entry, int, std::size_t> by_minute(
		[](const logs::Entry &e) { return std::stoi(e.time.substr(14, 2)); },
		[](std::size_t &n, const logs::Entry &) { ++n; });
	std::map<std::tuple<std::string, std::string>, std::size_t> level_counts;
	std::unordered_set<std::string> users;
	for (const auto &e : entries) {
		by_service.add(e);
		by_minute.add(e);
		++level_counts[{e.service, e.level}];
		if (auto it = e.fields.find("user"); it != e.fields.end())
			users.insert(it->second);
	}

	std::vector<std::unique_ptr<Sink>> sinks;
	sinks.push_back(std::make_unique<TableSink>());
	sinks.push_back(std::make_unique<CsvSink>());
	for (const auto &[svc, st] : by_service.sorted_by(
		     [](const logs::Stats &a, const logs::Stats &b) { return a.sum / a.n > b.sum / b.n; })) {
		std::vector<std::string> cells{svc, std::to_string(st.n), std::to_string(st.sum / st.n),
					       std::to_string(st.percentile(0.99)), std::to_string(st.max)};
		for (auto &s : sinks)
			s->row(cells);
	}

	graph::Graph g;
	g.edge("api", "auth", 2.5);
	g.edge("api", "search", 9);
	g.edge("auth", "db", 4);
	g.edge("search", "cache", 1);
	g.edge("cache", "db", 6);
	g.edge("api", "billing", 12);
	g.edge("billing", "db", 3);

	doc::Object report;
	doc::Array order;
	for (const auto &s : g.topo_order())
		order.emplace_back(s);
	report["topo"] = std::move(order);
	doc::Object dist;
	for (const auto &[k, d] : g.dijkstra("api"))
		dist[k] = std::isinf(d) ? doc::Value() : doc::Value(d);
	report["distance_from_api"] = std::move(dist);
	report["users"] = static_cast<double>(users.size());
	report["entries"] = static_cast<double>(entries.size());
	report["levels"] = static_cast<double>(level_counts.size());
	doc::Array busiest;
	for (const auto &[minute, n] : by_minute.sorted_by(std::greater<std::size_t>()))
		busiest.emplace_back(doc::Object{{"minute", minute}, {"entries", static_cast<double>(n)}});
	report["busiest_minutes"] = std::move(busiest);

	doc::Value root(std::move(report));
	for (auto &s : sinks)
		std::cout << s->finish() << '\n';
	doc::dump(std::cout, root);
	std::cout << "\nnodes: " << doc::count_nodes(root) << '\n';
	return 0;
}
