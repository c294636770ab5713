//! Micro benchmarks of the hot path every request takes: decode (defaults, conversion to the hub) and encode
//! (conversion to the version, serialization) of one pizza and of a 1,000-item list, in JSON and protobuf.

use apiserver::codec::{FieldValidation, MediaType};
use apiserver::meta::{ListMeta, ObjectMeta};
use criterion::{Criterion, black_box, criterion_group, criterion_main};
use pizza_apiserver::restaurant::{Pizza, PizzaSpec, PizzaTopping};

fn pizza(i: usize) -> Pizza {
    Pizza {
        metadata: ObjectMeta {
            name: format!("pizza-{i}"),
            namespace: "default".into(),
            uid: "6fbc647d-7bf3-41a1-af18-cd54c8514a28".into(),
            resource_version: (1000 + i).to_string(),
            generation: 1,
            labels: [("style".to_string(), "classic".to_string())].into(),
            ..ObjectMeta::default()
        },
        spec: PizzaSpec {
            toppings: vec![
                PizzaTopping {
                    name: "mozzarella".into(),
                    quantity: 2,
                },
                PizzaTopping {
                    name: "tomato".into(),
                    quantity: 1,
                },
                PizzaTopping {
                    name: "salami".into(),
                    quantity: 3,
                },
            ],
        },
        ..Pizza::default()
    }
}

fn benches(c: &mut Criterion) {
    let codec = Pizza::codec();
    let one = pizza(0);
    let many: Vec<Pizza> = (0..1000).map(pizza).collect();
    for (format, name) in [(MediaType::Json, "json"), (MediaType::Protobuf, "protobuf")] {
        for version in ["v1alpha1", "v1beta1"] {
            let body = codec.encode(&one, version, format).unwrap();
            c.bench_function(&format!("decode pizza {version} {name}"), |b| {
                b.iter(|| {
                    codec
                        .decode(black_box(&body), format, version, FieldValidation::Strict)
                        .unwrap()
                })
            });
            c.bench_function(&format!("encode pizza {version} {name}"), |b| {
                b.iter(|| codec.encode(black_box(&one), version, format).unwrap())
            });
        }
        c.bench_function(&format!("encode 1000-pizza list v1beta1 {name}"), |b| {
            b.iter(|| {
                codec
                    .encode_list(&ListMeta::default(), black_box(&many), "v1beta1", format)
                    .unwrap()
            })
        });
        let stored = codec.encode_stored(&one, format).unwrap();
        c.bench_function(&format!("decode stored pizza {name}"), |b| {
            b.iter(|| codec.decode_stored(black_box(&stored)).unwrap())
        });
    }
}

criterion_group!(codec_benches, benches);
criterion_main!(codec_benches);
