//! Nothing an expression or its input holds may panic the evaluator, overflow its stack or run unbounded.

use apiserver_cel::{Activation, Program};
use proptest::prelude::*;
use serde_json::json;

/// Compiles and evaluates, returning normally whatever happens.
fn run(expr: &str, act: &Activation) {
    if let Ok(p) = Program::compile(expr) {
        let _ = p.evaluate(act);
    }
}

fn activation() -> Activation {
    Activation::new().bind_json(
        "self",
        &json!({"s": "x".repeat(10_000), "l": (0..1000).collect::<Vec<_>>(), "m": {"a": 1}}),
    )
}

/// Deep nesting is refused, also on a thread with tokio's 2 MiB stack, before the parser can overflow it.
#[test]
fn deep_nesting_is_refused_on_a_small_stack() {
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            for src in [
                format!("{}1{}", "(".repeat(20_000), ")".repeat(20_000)),
                vec!["1"; 20_000].join(" + "),
                format!("self{}", ".a".repeat(20_000)),
                format!("self{}", "[0]".repeat(20_000)),
            ] {
                assert!(Program::compile(&src).is_err());
            }
            // and what is accepted runs there too
            let nested = format!("{}1{}", "(".repeat(60), ")".repeat(60));
            let program = Program::compile(&nested).expect("60 levels are fine");
            assert_eq!(
                program.evaluate(&Activation::new()),
                Ok(apiserver_cel::Value::Int(1))
            );
        })
        .expect("thread starts");
    handle.join().expect("no overflow");
}

#[test]
fn hostile_expressions_fail_cleanly() {
    let deep_parens = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
    let deep_lists = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
    let deep_index = format!("self.l{}", "[0]".repeat(20_000));
    let deep_ternary = "true ? 1 : ".repeat(9_000) + "1";
    let deep_unary = format!("{}1", "-".repeat(50_000));
    let long_sum = vec!["1"; 20_000].join(" + ");
    let long_and = vec!["true"; 20_000].join(" && ");
    let long_select = format!("self{}", ".a".repeat(20_000));
    let nested_macros = (0..40).fold("self.l".to_owned(), |acc, i| {
        format!("{acc}.map(x{i}, x{i})")
    });
    let huge_literal = format!("'{}'.size()", "a".repeat(99_000));
    let too_long = format!("'{}'", "a".repeat(200_000));
    let act = activation();
    for expr in [
        deep_parens.as_str(),
        deep_lists.as_str(),
        deep_index.as_str(),
        deep_ternary.as_str(),
        deep_unary.as_str(),
        long_sum.as_str(),
        long_and.as_str(),
        long_select.as_str(),
        nested_macros.as_str(),
        huge_literal.as_str(),
        too_long.as_str(),
        "self.s.matches('(a*)*b')",
        "self.s.find('(x+x+)+y')",
        "self.s.findAll('(?:x|x)*')",
        "'a'.matches('(a{1000}){1000}')",
        "self.s.matches('[')",
        "1 / 0",
        "1 % 0",
        "9223372036854775807 + 1",
        "-9223372036854775808 - 1",
        "-(-9223372036854775808)",
        "9223372036854775807 * 2",
        "18446744073709551615u + 1u",
        "int(1e300)",
        "uint(-1)",
        "double('x')",
        "timestamp('x')",
        "duration('9999999999999h')",
        "timestamp('9999-12-31T23:59:59Z') + duration('1h')",
        "self.l[1000]",
        "self.l[-1]",
        "self.m['zz']",
        "self.s.substring(5, 2)",
        "self.s.charAt(-1)",
        "'%d'.format(['x'])",
        "'%s'.format([])",
        "'%.999999999f'.format([1.0])",
        "self.l.all(x, self.l.all(y, self.l.all(z, true)))",
        "self.l.map(x, self.s + self.s).size()",
        "quantity('1e1000000000')",
        "quantity('99999999999999999999999999999999999999999999999Ei').asInteger()",
        "quantity(self.s)",
        "ip(self.s)",
        "cidr('::/999999999999999999999')",
        "url(self.s)",
        "semver('99999999999999999999.0.0')",
        "format.named(self.s)",
        "lists.range(100000000)",
        "[1, 2].slice(2, 1)",
        "[[[[1]]]].flatten(-1)",
        "{'a': 1, 'a': 2}",
        "sets.contains(self.l, self.l)",
        "optional.none().value()",
        "has(self.l)",
        "dyn(1).foo()",
        "self.@cost.charge(1)",
        "\u{0}",
        "'\\uD800'",
        "b'\\xff'.string()",
        "string(b'\\xff')",
        "",
        ")",
        "a.b.c(",
        "{",
        "[1, 2",
        "self.l.sortBy(x, -x)",
        "self.l.map(x, [x]).flatten().sort().distinct().reverse().size()",
    ] {
        run(expr, &act);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Arbitrary text, as an expression.
    #[test]
    fn arbitrary_source_never_panics(src in "\\PC{0,200}") {
        run(&src, &activation());
    }

    /// Expressions assembled from CEL's own tokens: more of them parse, and reach the interpreter.
    #[test]
    fn token_soup_never_panics(tokens in proptest::collection::vec(prop_oneof![
        Just("self"), Just(".s"), Just(".l"), Just(".m"), Just("("), Just(")"), Just("["), Just("]"), Just("{"),
        Just("}"), Just(","), Just(":"), Just("+"), Just("-"), Just("*"), Just("/"), Just("%"), Just("=="),
        Just("<"), Just("&&"), Just("||"), Just("!"), Just("?"), Just("1"), Just("0"), Just("-1"), Just("1.5"),
        Just("'a'"), Just("b'a'"), Just("null"), Just("true"), Just("x"), Just(".map(x, x)"), Just(".all(x, x)"),
        Just(".exists(x, x)"), Just(".size()"), Just("size("), Just("int("), Just("string("), Just("quantity("),
        Just("ip("), Just("cidr("), Just("url("), Just("semver("), Just(".isSorted()"), Just(".sum()"),
        Just(".min()"), Just(".find('a')"), Just(".?a"), Just("[?0]"), Just("optional.of("), Just(".orValue(1)"),
        Just("sets.contains("), Just(".substring(1, 0)"), Just(".charAt(9)"), Just(".format([1])"),
        Just("has("), Just(".split('')"), Just(".join()"), Just(".indexOf(1)"),
    ], 0..40)) {
        run(&tokens.concat(), &activation());
    }

    /// Arbitrary JSON bound as `self`, under a fixed set of rules.
    #[test]
    fn arbitrary_input_never_panics(data in arbitrary_json()) {
        let act = Activation::new().bind_json("self", &data);
        for expr in [
            "self.a.b", "self[0]", "size(self)", "self.all(x, x == x)", "self.map(x, x)", "self + self",
            "self.isSorted()", "self.sum()", "self.max()", "string(self)", "int(self)", "self.s.matches(self.p)",
            "quantity(self)", "ip(self)", "url(self)", "self == self",
        ] {
            run(expr, &act);
        }
    }
}

fn arbitrary_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        "\\PC{0,20}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
            proptest::collection::btree_map("[a-z]{1,3}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The depth guard must not refuse long but flat rules, as real validation rules are.
#[test]
fn long_flat_rules_are_accepted() {
    let many = (0..200)
        .map(|i| {
            format!(
                "self.spec.template.metadata.labels['k{i}'] == 'v' || self.spec.replicas >= {i}"
            )
        })
        .collect::<Vec<_>>()
        .join(" && ");
    let list = format!(
        "[{}].size() == 300",
        vec!["self.a.b.c + 1 - 2 * 3 / 4 % 5"; 300].join(", ")
    );
    let map = format!(
        "{{{}}}.size() > 0",
        (0..200)
            .map(|i| format!("'k{i}': self.x.y.z"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for src in [many, list, map] {
        assert!(Program::compile(&src).is_ok(), "{}", &src[..80]);
    }
}
