//! The pizza sample API server: types, strategies and admission for `restaurant.programming-kubernetes.info`.
