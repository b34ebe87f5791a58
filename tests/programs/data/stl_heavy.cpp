// stl_heavy.cpp — an STL-heavy C++17 program for gxx.test.
//
// Compiling it makes cc1plus instantiate many templates (containers, regex,
// iostreams, variant, function, threads); running it allocates through
// operator new from several threads.  All output is deterministic.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <iomanip>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <queue>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

namespace {

std::uint64_t fnv1a(const std::string &s, std::uint64_t h = 1469598103934665603ULL)
{
    for (unsigned char c : s) {
        h ^= c;
        h *= 1099511628211ULL;
    }
    return h;
}

struct Lcg {
    std::uint64_t x;
    explicit Lcg(std::uint64_t seed) : x(seed) {}
    std::uint32_t next() { x = x * 6364136223846793005ULL + 1442695040888963407ULL; return static_cast<std::uint32_t>(x >> 33); }
};

std::string word(Lcg &r)
{
    std::string w;
    int n = 2 + static_cast<int>(r.next() % 10);
    for (int i = 0; i < n; i++)
        w.push_back(static_cast<char>('a' + r.next() % 26));
    return w;
}

struct Shape {
    virtual ~Shape() = default;
    virtual double area() const = 0;
    virtual std::string name() const = 0;
};
struct Rect : Shape {
    double w, h;
    Rect(double a, double b) : w(a), h(b) {}
    double area() const override { return w * h; }
    std::string name() const override { return "rect"; }
};
struct Circle : Shape {
    double r;
    explicit Circle(double a) : r(a) {}
    double area() const override { return 3.0 * r * r; }
    std::string name() const override { return "circle"; }
};

using Value = std::variant<long, std::string, std::vector<int>>;

struct Describe {
    std::string operator()(long v) const { return "long:" + std::to_string(v); }
    std::string operator()(const std::string &s) const { return "str:" + s; }
    std::string operator()(const std::vector<int> &v) const { return "vec:" + std::to_string(v.size()); }
};

void containers()
{
    Lcg r(2005);
    std::vector<std::string> words;
    for (int i = 0; i < 200000; i++)
        words.push_back(word(r));

    std::map<std::string, int> ordered;
    std::unordered_map<std::string, std::vector<int>> index;
    for (int i = 0; i < static_cast<int>(words.size()); i++) {
        ordered[words[i]]++;
        index[words[i].substr(0, 3)].push_back(i);
    }
    std::cout << "map " << ordered.size() << " first " << ordered.begin()->first
              << " last " << ordered.rbegin()->first << "\n";
    std::size_t total = 0;
    for (const auto &kv : index)
        total += kv.second.size();
    std::cout << "unordered_map " << index.size() << " entries " << total << "\n";

    std::set<std::string> s(words.begin(), words.end());
    std::unordered_set<std::string> us(words.begin(), words.end());
    std::cout << "set " << s.size() << " unordered_set " << us.size() << "\n";

    std::vector<std::string> sorted = words;
    std::stable_sort(sorted.begin(), sorted.end(), [](const std::string &a, const std::string &b) {
        return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    std::cout << "sorted unique " << sorted.size() << " " << sorted.front() << " " << sorted.back() << "\n";

    std::list<int> l;
    std::deque<int> d;
    for (int i = 0; i < 300000; i++) {
        if (i % 2) l.push_back(i); else l.push_front(i);
        d.push_back(i);
        if (i % 3 == 0) d.pop_front();
    }
    l.sort();
    std::cout << "list " << l.size() << " " << l.front() << " " << l.back()
              << " deque " << d.size() << " " << d.front() << "\n";

    std::priority_queue<std::pair<int, std::string>> pq;
    for (int i = 0; i < 100000; i++) {
        pq.emplace(static_cast<int>(r.next() % 1000000), words[i]);
        if (pq.size() > 1000) pq.pop();
    }
    std::cout << "priority_queue top " << pq.top().first << " " << pq.top().second << "\n";

    std::uint64_t h = 0;
    for (const auto &kv : ordered)
        h = fnv1a(kv.first + ":" + std::to_string(kv.second), h);
    std::cout << "hash " << std::hex << h << std::dec << "\n";
}

void objects()
{
    std::vector<std::unique_ptr<Shape>> shapes;
    std::vector<std::shared_ptr<Shape>> shared;
    for (int i = 0; i < 100000; i++) {
        if (i % 2) shapes.push_back(std::make_unique<Rect>(i % 7, i % 11));
        else shapes.push_back(std::make_unique<Circle>(i % 13));
        if (i % 10 == 0) shared.push_back(std::make_shared<Circle>(i % 5));
    }
    std::map<std::string, double> areas;
    for (const auto &p : shapes)
        areas[p->name()] += p->area();
    for (const auto &kv : areas)
        std::cout << "area " << kv.first << " " << std::fixed << std::setprecision(1) << kv.second << "\n";
    std::vector<std::shared_ptr<Shape>> copies(shared.begin(), shared.end());
    std::cout << "shared use_count " << shared.front().use_count() << " n " << copies.size() << "\n";

    std::vector<std::function<long(long)>> fns;
    for (int i = 0; i < 50000; i++) {
        std::string tag = "f" + std::to_string(i);
        fns.emplace_back([i, tag](long x) { return x * i + static_cast<long>(tag.size()); });
    }
    long acc = 0;
    for (auto &f : fns)
        acc += f(3);
    std::cout << "functions " << acc << "\n";

    std::vector<Value> values;
    for (int i = 0; i < 60000; i++) {
        switch (i % 3) {
        case 0: values.emplace_back(static_cast<long>(i)); break;
        case 1: values.emplace_back(std::string(i % 50, 'v')); break;
        default: values.emplace_back(std::vector<int>(i % 40, i)); break;
        }
    }
    std::uint64_t vh = 0;
    for (const auto &v : values)
        vh = fnv1a(std::visit(Describe{}, v), vh);
    std::cout << "variant hash " << std::hex << vh << std::dec << "\n";

    std::optional<std::string> opt;
    for (int i = 0; i < 1000; i++)
        if (i % 97 == 0) opt = std::to_string(i);
    std::cout << "optional " << opt.value_or("none") << "\n";
}

void text()
{
    std::ostringstream out;
    for (int i = 0; i < 50000; i++)
        out << "id=" << i << " user" << (i * 7) % 1000 << "@host" << i % 13 << ".example.org value=" << i * 3 << "\n";
    std::string doc = out.str();
    std::cout << "document " << doc.size() << "\n";

    std::regex email(R"((\w+)@(host\d+)\.example\.org)");
    std::map<std::string, int> hosts;
    std::size_t matches = 0;
    for (auto it = std::sregex_iterator(doc.begin(), doc.end(), email); it != std::sregex_iterator(); ++it) {
        hosts[(*it)[2].str()]++;
        matches++;
    }
    std::cout << "regex matches " << matches << " hosts " << hosts.size() << " host7 " << hosts["host7"] << "\n";
    std::string replaced = std::regex_replace(doc.substr(0, 200000), std::regex(R"(value=(\d+))"), "v[$1]");
    std::cout << "regex_replace " << replaced.size() << " " << std::hex << fnv1a(replaced) << std::dec << "\n";

    std::istringstream in(doc);
    std::string line;
    std::vector<std::string> fields;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string f;
        while (ls >> f)
            fields.push_back(f);
    }
    std::cout << "fields " << fields.size() << "\n";
}

void threads()
{
    std::mutex m;
    std::deque<std::vector<std::string>> queue;
    std::vector<std::thread> producers, consumers;
    bool done[8] = {};
    for (int t = 0; t < 8; t++) {
        producers.emplace_back([t, &m, &queue]() {
            Lcg r(static_cast<std::uint64_t>(t) + 1);
            for (int i = 0; i < 4000; i++) {
                std::vector<std::string> batch;
                for (int j = 0; j < 10; j++)
                    batch.push_back(word(r) + std::to_string(t));
                std::lock_guard<std::mutex> g(m);
                queue.push_back(std::move(batch));
            }
        });
    }
    std::uint64_t consumed = 0, chars = 0;
    for (int t = 0; t < 4; t++) {
        consumers.emplace_back([&]() {
            for (;;) {
                std::vector<std::string> batch;
                {
                    std::lock_guard<std::mutex> g(m);
                    if (!queue.empty()) {
                        batch = std::move(queue.front());
                        queue.pop_front();
                    } else if (std::all_of(std::begin(done), std::end(done), [](bool b) { return b; })) {
                        return;
                    }
                }
                if (batch.empty()) {
                    std::this_thread::yield();
                    continue;
                }
                std::uint64_t c = 0;
                for (const auto &s : batch) c += s.size();
                std::lock_guard<std::mutex> g(m);
                consumed += batch.size();
                chars += c;
            }
        });
    }
    for (int t = 0; t < 8; t++) {
        producers[t].join();
        std::lock_guard<std::mutex> g(m);
        done[t] = true;
    }
    for (auto &c : consumers)
        c.join();
    std::cout << "threads consumed " << consumed << " strings, " << chars << " chars\n";
}

} // namespace

int main()
{
    containers();
    objects();
    text();
    threads();
    std::cout << "done\n";
    return 0;
}
